# Builds the images of both operators for clusters such as kind:
#   docker build --target olm-operator -t ghcr.io/olm-rs/olm-operator:latest .
#   docker build --target catalog-operator -t ghcr.io/olm-rs/catalog-operator:latest .
#   kind load docker-image ghcr.io/olm-rs/olm-operator:latest ghcr.io/olm-rs/catalog-operator:latest --name olm-rs
FROM rust:1.95-bookworm AS build
# catalog-operator is linked statically (musl): a bundle unpack Job runs it
# inside the bundle image, which has no libc (`catalog-operator unpack copy`).
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add "$(uname -m)-unknown-linux-musl"
WORKDIR /src
COPY . .
RUN cargo build --profile dist --locked -p olm-operator
RUN target="$(uname -m)-unknown-linux-musl" \
    && cargo build --profile dist --locked -p catalog-operator --target "$target" \
    && cp "target/$target/dist/catalog-operator" /catalog-operator

FROM gcr.io/distroless/cc-debian12:nonroot AS olm-operator
COPY --from=build /src/target/dist/olm-operator /usr/local/bin/olm-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/olm-operator"]

FROM gcr.io/distroless/static-debian12:nonroot AS catalog-operator
COPY --from=build /catalog-operator /usr/local/bin/catalog-operator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/catalog-operator"]
