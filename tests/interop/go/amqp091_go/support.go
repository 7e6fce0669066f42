package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// S is one scenario's run: the names it declares, the connections it opened (closed when it
// ends, whatever happens) and the step it is at (named in a timeout's reason).
type S struct {
	name string
	url  string

	mu       sync.Mutex
	conns    []*amqp.Connection
	step     string
	confirms map[*amqp.Channel]chan amqp.Confirmation // publishConfirmed's listeners
}

// failure is what a failed assertion panics with; capture turns it into the RESULT reason.
type failure string

func (s *S) capture(run func(*S)) (reason string) {
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(failure); ok {
				reason = string(f)
				return
			}
			reason = fmt.Sprintf("panic: %v", r)
		}
	}()
	run(s)
	return ""
}

func (s *S) failf(format string, args ...interface{}) {
	panic(failure(fmt.Sprintf(format, args...)))
}

func (s *S) check(ok bool, format string, args ...interface{}) {
	if !ok {
		s.failf(format, args...)
	}
}

func (s *S) must(err error, what string) {
	if err != nil {
		s.failf("%s: %v", what, err)
	}
}

// at records the step the scenario is at, for a timeout's reason.
func (s *S) at(step string) {
	s.mu.Lock()
	s.step = step
	s.mu.Unlock()
}

func (s *S) lastStep() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

// named is an exchange or queue name of this scenario: one subject word that begins with the
// client's name, as the contract asks.
func (s *S) named(suffix string) string {
	return client + "-" + s.name + "-" + suffix
}

func (s *S) track(conn *amqp.Connection) *amqp.Connection {
	s.mu.Lock()
	s.conns = append(s.conns, conn)
	s.mu.Unlock()
	return conn
}

func (s *S) closeAll() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, conn := range conns {
		_ = conn.Close()
	}
}

func (s *S) dial() *amqp.Connection {
	s.at("dial")
	conn, err := amqp.Dial(s.url)
	s.must(err, "dial "+s.url)
	return s.track(conn)
}

func (s *S) channel(conn *amqp.Connection) *amqp.Channel {
	ch, err := conn.Channel()
	s.must(err, "channel.open")
	return ch
}

func (s *S) confirmChannel(conn *amqp.Connection) *amqp.Channel {
	ch := s.channel(conn)
	s.must(ch.Confirm(false), "confirm.select")
	return ch
}

// queue declares a durable queue of this scenario and checks the declare-ok names it.
func (s *S) queue(ch *amqp.Channel, suffix string) string {
	name := s.named(suffix)
	s.at("queue.declare " + name)
	q, err := ch.QueueDeclare(name, true, false, false, false, nil)
	s.must(err, "queue.declare "+name)
	s.check(q.Name == name, "queue.declare-ok named %q, declared %q", q.Name, name)
	return name
}

// boundQueue declares a durable exchange of this scenario and a queue bound to it with key.
func (s *S) boundQueue(ch *amqp.Channel, kind, key string) (exchange, queue string) {
	exchange = s.named("x")
	s.must(ch.ExchangeDeclare(exchange, kind, true, false, false, false, nil), "exchange.declare "+exchange)
	queue = s.queue(ch, "q")
	s.must(ch.QueueBind(queue, key, exchange, false, nil), "queue.bind")
	return exchange, queue
}

// publishConfirmed publishes on a confirm-mode channel and waits for the broker's basic.ack.
// The outcome is read from a NotifyPublish listener of the channel's, not from the deferred
// confirmation: amqp091-go before 1.8.0 (Debian's is 1.5.0) records a deferred confirmation only
// after the publish is on the socket, and drops an ack that arrives before that (upstream
// issue #182), so a fast broker's ack could leave Wait() hanging.
func (s *S) publishConfirmed(ch *amqp.Channel, exchange, key string, msg amqp.Publishing) {
	s.at("publish with confirm " + string(msg.Body))
	confirms := s.confirmsOf(ch)
	tag := ch.GetNextPublishSeqNo()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
	s.must(err, "basic.publish")
	for {
		select {
		case c := <-confirms:
			if c.DeliveryTag < tag {
				continue // an earlier publish's, confirmed while nobody waited for it
			}
			s.check(c.DeliveryTag == tag, "publisher confirm for tag %d, expected %d (%q)", c.DeliveryTag, tag, msg.Body)
			if !c.Ack {
				s.failf("basic.nack for %q (expected basic.ack)", msg.Body)
			}
			return
		case <-ctx.Done():
			s.failf("no publisher confirm for %q within %s", msg.Body, waitLimit)
		}
	}
}

// confirmsOf: the channel's NotifyPublish listener for publishConfirmed, made on first use (a
// listener cannot be removed, so there is one per channel; its buffer keeps amqp091's reader
// from blocking on confirms nobody waits for).
func (s *S) confirmsOf(ch *amqp.Channel) chan amqp.Confirmation {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.confirms == nil {
		s.confirms = map[*amqp.Channel]chan amqp.Confirmation{}
	}
	c, ok := s.confirms[ch]
	if !ok {
		c = ch.NotifyPublish(make(chan amqp.Confirmation, 1024))
		s.confirms[ch] = c
	}
	return c
}

// publishBodies publishes persistent messages with the given bodies, each confirmed.
func (s *S) publishBodies(conn *amqp.Connection, queue string, bodies []string) {
	ch := s.confirmChannel(conn)
	defer ch.Close()
	for _, body := range bodies {
		s.publishConfirmed(ch, "", queue, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)})
	}
}

func (s *S) consume(ch *amqp.Channel, queue string) <-chan amqp.Delivery {
	s.at("basic.consume " + queue)
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	s.must(err, "basic.consume "+queue)
	return deliveries
}

// next waits for the next delivery of a consumer.
func (s *S) next(deliveries <-chan amqp.Delivery, what string) amqp.Delivery {
	s.at("waiting for " + what)
	select {
	case d, ok := <-deliveries:
		s.check(ok, "waiting for %s: the consumer's delivery channel closed", what)
		return d
	case <-time.After(waitLimit):
		s.failf("waiting for %s: no delivery within %s", what, waitLimit)
	}
	return amqp.Delivery{}
}

// expect waits for the next delivery and checks its body and redelivered flag.
func (s *S) expect(deliveries <-chan amqp.Delivery, body string, redelivered bool) amqp.Delivery {
	d := s.next(deliveries, fmt.Sprintf("%q", body))
	s.check(string(d.Body) == body && d.Redelivered == redelivered,
		"expected %q redelivered=%v, got %q redelivered=%v", body, redelivered, d.Body, d.Redelivered)
	return d
}

func (s *S) ack(d amqp.Delivery, multiple bool) {
	s.must(d.Ack(multiple), fmt.Sprintf("basic.ack %d multiple=%v", d.DeliveryTag, multiple))
}

// expectEmpty checks a basic.get answers get-empty.
func (s *S) expectEmpty(ch *amqp.Channel, queue, why string) {
	s.at("basic.get (expecting empty) " + queue)
	d, ok, err := ch.Get(queue, true)
	s.must(err, "basic.get "+queue)
	s.check(!ok, "%s: basic.get returned %q, expected get-empty", why, d.Body)
}

// replyCode is the reply code of a channel or connection exception, or 0.
func replyCode(err error) int {
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		return amqpErr.Code
	}
	return 0
}

func numbered(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func bodiesOf(ds []amqp.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Body))
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
