// Command amqp091_go is the interop matrix's program for github.com/rabbitmq/amqp091-go, the Go
// client RabbitMQ maintains. One program, two builds: Debian's golang-github-rabbitmq-amqp091-go-dev
// in GOPATH mode (client amqp091_go) and the current release in module mode (client
// amqp091_go_module, this folder's go.mod). It runs each scenario against AMQP_URL in the
// client's own idiom and prints one RESULT line per scenario, as tests/interop/README.md specifies. Besides the standard scenarios it runs the two consumer
// patterns of a humus-style RabbitMQ service (a careful client's design): ordered_drain and at_most_once_batch.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// client is the name the driver expects in the RESULT lines: one program serves two rows.
var client = clientName()

func clientName() string {
	if name := os.Getenv("INTEROP_CLIENT"); name != "" {
		return name
	}
	return "amqp091_go"
}

// waitLimit bounds every wait for an event (a delivery, a confirm, a return, a reconnect): a
// sanitized server is slow, and a missing event must become a `fail`, not a hang.
const waitLimit = 30 * time.Second

// scenarioLimit bounds a whole scenario, so that one stuck in an RPC the server never answers is
// reported and the others still run.
const scenarioLimit = 120 * time.Second

type scenario struct {
	name string
	run  func(s *S)
}

// The order matters only for reconnect, which restarts the server and so runs last.
var scenarios = []scenario{
	{"declare", declare},
	{"publish_confirm", publishConfirm},
	{"consume_prefetch_ack", consumePrefetchAck},
	{"nack_requeue", nackRequeue},
	{"mandatory_return", mandatoryReturn},
	{"basic_get", basicGet},
	{"ordered_drain", orderedDrain},
	{"at_most_once_batch", atMostOnceBatch},
	{"reconnect", reconnect},
}

func main() {
	url := os.Getenv("AMQP_URL")
	fmt.Println("LIBRARY", client, "amqp091-go", libraryVersion())
	fmt.Println("SCENARIOS", client, "ordered_drain", "at_most_once_batch")
	failed := false
	for _, sc := range scenarios {
		reason := runScenario(url, sc)
		if reason == "" {
			fmt.Printf("RESULT %s %s pass\n", client, sc.name)
			continue
		}
		failed = true
		fmt.Printf("RESULT %s %s fail %s\n", client, sc.name, oneLine(reason))
	}
	if failed {
		os.Exit(1)
	}
}

// runScenario returns "" when the scenario passed, or why it failed.
func runScenario(url string, sc scenario) string {
	s := &S{name: sc.name, url: url}
	done := make(chan string, 1)
	go func() {
		defer s.closeAll()
		done <- s.capture(sc.run)
	}()
	select {
	case reason := <-done:
		return reason
	case <-time.After(scenarioLimit):
		s.closeAll() // unblocks an RPC the server never answered
		return fmt.Sprintf("did not finish within %s (last step: %s)", scenarioLimit, s.lastStep())
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
