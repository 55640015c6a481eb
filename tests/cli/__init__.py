"""Tests of the command line (mas_econ): start-up, plugins, listings, bad input."""
