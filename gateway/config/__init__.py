"""What the operator wrote: settings (flags, TOML, environment) and the one table of
route options."""
