"""The upstream carriers: moving JSON-RPC messages to and from one upstream endpoint.

- ``base``: what every carrier offers the link (``Carrier``, ``UpstreamReply``,
  ``CarrierError``), what a carrier's error means to a call, and the one rule
  for which message answers a request (``is_response_to``, ``final``);
- ``stdio``, ``streamable`` (Streamable HTTP) and ``legacy_sse`` (HTTP+SSE,
  and the probe that finds such a server): the carriers;
- ``httpio``: the HTTP carriers' shared I/O (opening requests, bodies, errors,
  SSE replies);
- ``demux``: sorting a shared channel's messages out to their requests (which
  listen a message names, the carriers' user says: ``listen_named``);
- ``h1``: the h1 HTTP/1.1 client pool; ``redirects``: what an upstream's 3xx gets.

The carriers know nothing of MCP revisions (import-linter keeps them off
``gateway.protocol``): what a revision means by a message is the caller's to say.
"""
