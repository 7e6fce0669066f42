package main

import (
	"os"
	"runtime/debug"
	"strings"
)

const libraryModule = "github.com/rabbitmq/amqp091-go"

// libraryVersion is the amqp091-go release this binary was built with and where it came from,
// for the contract's LIBRARY line. A module build records it in the binary's build info; a
// GOPATH build records no modules, so amqp091_go.sh passes the Debian package's version in
// AMQP091_GO_DEBIAN_VERSION.
func libraryVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == libraryModule {
				return strings.TrimPrefix(dep.Version, "v") + " (Go module proxy)"
			}
		}
	}
	if debian := os.Getenv("AMQP091_GO_DEBIAN_VERSION"); debian != "" {
		upstream := debian
		if dash := strings.LastIndex(debian, "-"); dash > 0 {
			upstream = debian[:dash]
		}
		return upstream + " (Debian " + debian + ")"
	}
	return "unknown (no build info, and AMQP091_GO_DEBIAN_VERSION is unset)"
}
