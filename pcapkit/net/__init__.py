"""Link → IP → TCP/UDP decoding, flows and TCP reassembly (columnar, numpy)."""
