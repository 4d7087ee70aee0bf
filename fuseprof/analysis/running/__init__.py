"""Running it all: one trace or a rank set analysed section by section, stored and loaded, in worker processes. Reads every layer below."""
