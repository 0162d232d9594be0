"""The process's edges: the command line, the wiring of routes, the ops endpoints,
start and drain, what `gateway probe` reports."""
