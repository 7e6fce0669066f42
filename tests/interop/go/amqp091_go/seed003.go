package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The two consumer patterns of a humus-style RabbitMQ service: it dials the
// broker itself and opens AMQP on that connection with amqp.Open, consumes with a prefetch and
// manual acks, and never uses auto-ack.

// openOwn opens AMQP over a TCP connection dialled by the caller, as that service does. The raw
// connection is returned too, so a scenario can drop it the way a crashed process would.
func (s *S) openOwn() (*amqp.Connection, net.Conn) {
	s.at("dial + amqp.Open")
	uri, err := amqp.ParseURI(s.url)
	s.must(err, "parse AMQP_URL")
	address := net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	var raw net.Conn
	if uri.Scheme == "amqps" { // its own TLS, as such a service dials it (the CA from SSL_CERT_FILE)
		raw, err = tls.DialWithDialer(&net.Dialer{Timeout: waitLimit}, "tcp", address, &tls.Config{ServerName: uri.Host})
	} else {
		raw, err = net.DialTimeout("tcp", address, waitLimit)
	}
	s.must(err, "dial")
	conn, err := amqp.Open(raw, amqp.Config{
		SASL:      []amqp.Authentication{uri.PlainAuth()},
		Vhost:     uri.Vhost,
		Heartbeat: 10 * time.Second,
		Locale:    "en_US",
	})
	s.must(err, "amqp.Open")
	return s.track(conn), raw
}

// service is the consuming side of such a service: its own connection, a queue holding the
// messages m1..mN, and a manual-ack consumer on it with a prefetch.
type service struct {
	conn       *amqp.Connection
	raw        net.Conn
	ch         *amqp.Channel
	all        []string
	deliveries <-chan amqp.Delivery
}

func (s *S) startService(messages, prefetch int, tag string) service {
	conn, raw := s.openOwn()
	ch := s.channel(conn)
	queue := s.queue(ch, "q")
	all := numbered("m", 1, messages)
	s.publishBodies(conn, queue, all)
	s.must(ch.Qos(prefetch, 0, false), "basic.qos")
	s.at("basic.consume " + queue)
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	s.must(err, "basic.consume")
	return service{conn, raw, ch, all, deliveries}
}

// orderedDrain: at least once, one delivery processed at a time in order. On shutdown, while m3
// is being processed, the consumer is cancelled, m3 finishes and is acked, and what it received
// but did not process goes back with ONE basic.nack(multiple, requeue). A second consumer then
// gets exactly m4..m10, the returned ones flagged redelivered and the rest in order; m1..m3
// never again.
func orderedDrain(s *S) {
	const prefetch = 5
	tag := client + "-ordered-drain" // the service names its consumer (not from os.Args)
	svc := s.startService(10, prefetch, tag)
	ch, all, deliveries := svc.ch, svc.all, svc.deliveries

	for _, body := range all[:2] {
		s.ack(s.expect(deliveries, body, false), false)
	}
	inFlight := s.expect(deliveries, "m3", false)
	s.at("basic.cancel")
	s.must(ch.Cancel(tag, false), "basic.cancel")
	unprocessed := s.drain(deliveries)
	fmt.Printf("%s: after basic.cancel the consumer still held %v\n", s.name, describe(unprocessed))
	s.ack(inFlight, false)
	s.check(len(unprocessed) <= prefetch-1 && equal(bodiesOf(unprocessed), all[3:3+len(unprocessed)]),
		"after m3, with prefetch %d, the consumer held %v (expected a prefix of m4..m7)", prefetch, bodiesOf(unprocessed))
	if len(unprocessed) > 0 {
		last := unprocessed[len(unprocessed)-1]
		s.must(last.Nack(true, true), "basic.nack multiple requeue")
	}
	s.must(svc.conn.Close(), "connection.close")

	returned := map[string]bool{}
	for _, d := range unprocessed {
		returned[string(d.Body)] = true
	}
	s.expectRest(all[3:], returned, true)
}

// atMostOnceBatch: a batch of prefetch deliveries is acked with one basic.ack(multiple), and a
// basic.qos round trip confirms the ack before the batch is processed (the broker answers a
// channel's methods in order). The process then takes the next batch and crashes (its socket
// drops, no connection.close): a second consumer gets the unacked batch again, redelivered, and
// the rest, but never the acked batch.
func atMostOnceBatch(s *S) {
	const batch = 3
	svc := s.startService(9, batch, "")
	ch, all, deliveries := svc.ch, svc.all, svc.deliveries

	var lastOfBatch amqp.Delivery
	for _, body := range all[:batch] {
		lastOfBatch = s.expect(deliveries, body, false)
	}
	s.ack(lastOfBatch, true)
	s.at("basic.qos confirming the batch ack")
	s.must(ch.Qos(batch, 0, false), "basic.qos after the batch ack")
	for _, body := range all[batch : 2*batch] {
		s.expect(deliveries, body, false)
	}
	s.must(svc.raw.Close(), "dropping the socket")

	returned := map[string]bool{}
	for _, body := range all[batch : 2*batch] {
		returned[body] = true
	}
	s.expectRest(all[batch:], returned, false)
}

// drain returns what a cancelled consumer's channel still hands over before amqp091 closes it.
func (s *S) drain(deliveries <-chan amqp.Delivery) []amqp.Delivery {
	s.at("draining the cancelled consumer")
	var out []amqp.Delivery
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return out
			}
			out = append(out, d)
		case <-time.After(waitLimit):
			s.failf("the delivery channel was not closed within %s of basic.cancel-ok", waitLimit)
		}
	}
}

// expectRest: a second consumer, on a new connection, gets exactly `want` once each, the
// `returned` ones flagged redelivered and the others not (in the queue's order when `ordered`:
// requeued messages go back to their places, ahead of the rest, as in RabbitMQ); then a sentinel
// published afterwards is the next delivery, so nothing acked came back before it.
func (s *S) expectRest(want []string, returned map[string]bool, ordered bool) {
	conn := s.dial()
	ch := s.channel(conn)
	queue := s.named("q")
	deliveries := s.consume(ch, queue)
	var got []amqp.Delivery
	for range want {
		got = append(got, s.next(deliveries, fmt.Sprintf("delivery %d of %v", len(got)+1, want)))
	}
	var expected []string
	for _, body := range want {
		expected = append(expected, flagged(body, returned[body]))
	}
	seen := describe(got)
	fmt.Printf("%s: the second consumer got %v\n", s.name, seen)
	if ordered {
		s.check(equal(seen, expected), "the second consumer got %v, expected %v in this order (/R: redelivered)", seen, expected)
	} else {
		s.check(equal(sorted(seen), sorted(expected)), "the second consumer got %v, expected %v (/R: redelivered)", seen, expected)
	}
	s.ack(got[len(got)-1], true)
	s.publishBodies(conn, queue, []string{"end"})
	s.ack(s.expect(deliveries, "end", false), false)
}

// describe lists deliveries as their bodies, suffixed /R when redelivered.
func describe(ds []amqp.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, flagged(string(d.Body), d.Redelivered))
	}
	return out
}

func flagged(body string, redelivered bool) string {
	if redelivered {
		return body + "/R"
	}
	return body
}

func sorted(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	return out
}
