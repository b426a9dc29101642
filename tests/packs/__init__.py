"""Check packs used by the tests: importable modules, as a deployment's packs are."""
