"""Drive the sans-I/O dissectors over reassembled streams and datagrams (decryption included)."""
