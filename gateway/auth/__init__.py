"""OAuth in front of protected upstreams: metadata documents, challenges, token checks.

Nothing here knows an MCP revision: discovery documents (RFC 9728, RFC 8414) and
`WWW-Authenticate` challenges (RFC 6750) are the same for every client; what
differs between eras is which document a client asks for first, and the gateway
simply serves all of them.
"""
