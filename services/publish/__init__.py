"""Published views: pages of already-released figures that an audience opens without spending."""
