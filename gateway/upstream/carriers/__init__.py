"""The upstream carriers: moving JSON-RPC messages to and from one upstream endpoint.

``base`` holds what every carrier offers the link (``Carrier``, ``Exchange``,
``CarrierError``) and the one rule for which message answers a request;
``stdio`` and ``http`` are the carriers; ``demux`` sorts a shared channel's
messages out to their requests; ``h1`` is the lean HTTP/1.1 client pool and
``redirects`` the policy for an upstream's 3xx.  The carriers know nothing of
MCP revisions: what a revision means by a message is the caller's to say.
"""
