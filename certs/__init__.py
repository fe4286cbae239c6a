"""Certificate authority and serving/client certificate generation."""
