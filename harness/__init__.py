"""bugmatrix: reproduce upstream bugs across library versions."""
