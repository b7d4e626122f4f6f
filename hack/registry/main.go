// Command registry is the OCI registry olm-rs tests pull bundle and catalog images from: the
// distribution registry (filesystem storage only, so that it builds quickly from Go modules) on
// loopback, with the repositories under one prefix (default "private/") behind HTTP basic
// authentication and every other repository open.
//
//	registry --dir DIR [--addr 127.0.0.1:0] [--private private/] [--user olm] [--password-file FILE]
//
// It writes the address it listens on to DIR/addr once it serves.
package main

import (
	"context"
	"crypto/subtle"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	dir := flag.String("dir", "", "state directory: image storage, and the addr file")
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	private := flag.String("private", "private/", "repository prefix that requires authentication")
	user := flag.String("user", "olm", "user name for the private repositories")
	passwordFile := flag.String("password-file", "", "file holding the password for the private repositories")
	flag.Parse()
	if *dir == "" || *passwordFile == "" {
		fmt.Fprintln(os.Stderr, "registry: --dir and --password-file are required")
		os.Exit(2)
	}
	password, err := os.ReadFile(*passwordFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "registry: reading the password: %v\n", err)
		os.Exit(1)
	}

	config := &configuration.Configuration{
		Storage: configuration.Storage{
			"filesystem": configuration.Parameters{"rootdirectory": filepath.Join(*dir, "data")},
			"delete":     configuration.Parameters{"enabled": true},
		},
	}
	config.Log.Level = "warn"
	config.HTTP.Secret = "olm-rs-test-registry"
	app := handlers.NewApp(context.Background(), config)

	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "registry: listening on %s: %v\n", *addr, err)
		os.Exit(1)
	}
	handler := requireAuth(app, "/v2/"+*private, *user, strings.TrimSpace(string(password)))
	tmp := filepath.Join(*dir, "addr.tmp")
	if err := os.WriteFile(tmp, []byte(listener.Addr().String()+"\n"), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "registry: %v\n", err)
		os.Exit(1)
	}
	if err := os.Rename(tmp, filepath.Join(*dir, "addr")); err != nil {
		fmt.Fprintf(os.Stderr, "registry: %v\n", err)
		os.Exit(1)
	}
	if err := http.Serve(listener, handler); err != nil {
		fmt.Fprintf(os.Stderr, "registry: %v\n", err)
		os.Exit(1)
	}
}

// requireAuth answers 401 with a Basic challenge for paths under prefix unless the request
// carries the user and password. The version check (/v2/) answers the same way, as registries
// with authentication do: clients learn there that credentials are wanted (anonymous clients
// carry on without, and still read the open repositories).
func requireAuth(next http.Handler, prefix, user, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" || strings.HasPrefix(r.URL.Path, prefix) {
			u, p, ok := r.BasicAuth()
			good := ok && subtle.ConstantTimeCompare([]byte(u), []byte(user)) == 1 &&
				subtle.ConstantTimeCompare([]byte(p), []byte(password)) == 1
			if !good {
				w.Header().Set("WWW-Authenticate", `Basic realm="olm-rs test registry"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
