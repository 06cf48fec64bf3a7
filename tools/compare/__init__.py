"""biofs-compare's modules, one job each (tools/biofs-compare is the entry point and says which)."""
