"""The web layer's callbacks: one module (or package) per page, named as its ``layouts`` package;
``shell`` routes the pages (Dash Pages) and ``guard`` holds the one role check."""
