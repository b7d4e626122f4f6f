//! Catalog content: packages, channels, bundles and their properties, and the loaders that read them.
