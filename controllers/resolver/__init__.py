"""The resolver: a ModelArtifact's source resolved to its manifest digest, and revalidated on
its interval; the hub passes, the verdict, the hub clients and the resolver's settings."""
