"""Tests of the project as a whole: its layering, its documentation, its packaging."""
