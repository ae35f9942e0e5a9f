"""Tests on captures nobody on this project made (``../shared/realworld``, ``../shared/corpus``).

They skip cleanly when ``../shared`` is absent (a user's checkout)."""
