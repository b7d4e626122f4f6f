# Builds the images of both operators for clusters such as kind:
#   docker build --target olm-operator -t ghcr.io/olm-rs/olm-operator:latest .
#   docker build --target catalog-operator -t ghcr.io/olm-rs/catalog-operator:latest .
#   kind load docker-image ghcr.io/olm-rs/olm-operator:latest ghcr.io/olm-rs/catalog-operator:latest --name olm-rs
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p olm-operator -p catalog-operator

FROM gcr.io/distroless/cc-debian12:nonroot AS olm-operator
COPY --from=build /src/target/release/olm-operator /usr/local/bin/olm-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/olm-operator"]

FROM gcr.io/distroless/cc-debian12:nonroot AS catalog-operator
COPY --from=build /src/target/release/catalog-operator /usr/local/bin/catalog-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/catalog-operator"]
