"""Preparing the shared dataset: its spec, generation, the formats written, the manifest, verification."""
