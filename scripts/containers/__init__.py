"""The container check (scripts/container-check), a module per stage."""
