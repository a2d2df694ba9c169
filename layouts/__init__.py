"""The web layer's components: one package per page (its layout, figures and parts), shared
components in ``components/``, every component id in ``ids.py``."""
