"""Mechanisms of the seed papers beyond posterior sampling (DESIGN.md section 9)."""
