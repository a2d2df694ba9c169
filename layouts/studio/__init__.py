"""The release studio (``/release``): per-record copies (page), their figures, and the synthetic
copy (synthetic)."""
