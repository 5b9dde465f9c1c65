"""`marketspread run`: the whole pipeline on one machine, checked against the reference model."""
