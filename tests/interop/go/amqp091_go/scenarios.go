package main

import (
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// declare: a durable topic exchange, a queue bound to it with a wildcard key; passive
// re-declares succeed, a publish through the binding arrives and one the binding does not match
// does not; a passive declare of a missing queue is 404 and the connection survives it.
func declare(s *S) {
	conn := s.dial()
	ch := s.channel(conn)
	exchange, queue := s.boundQueue(ch, amqp.ExchangeTopic, "stock.*.eu")
	s.must(ch.ExchangeDeclarePassive(exchange, amqp.ExchangeTopic, true, false, false, false, nil), "passive exchange.declare")
	_, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	s.must(err, "passive queue.declare")

	// One channel's publishes reach a queue in order, so the sentinel arriving right after
	// "routed" shows "unrouted" (published between them) was not routed to the queue.
	for _, key := range []string{"stock.sap.eu", "stock.sap.us", "stock.ibm.eu"} {
		msg := amqp.Publishing{Body: []byte(key)}
		s.must(ch.Publish(exchange, key, false, false, msg), "basic.publish "+key)
	}
	deliveries := s.consume(ch, queue)
	first := s.expect(deliveries, "stock.sap.eu", false)
	s.check(first.Exchange == exchange && first.RoutingKey == "stock.sap.eu",
		"delivery names exchange %q key %q", first.Exchange, first.RoutingKey)
	s.ack(s.expect(deliveries, "stock.ibm.eu", false), true)

	missing := s.channel(conn)
	_, err = missing.QueueDeclarePassive(s.named("missing"), true, false, false, false, nil)
	s.check(replyCode(err) == amqp.NotFound, "passive declare of a missing queue: expected 404, got %v", err)
	again := s.channel(conn)
	_, err = again.QueueDeclarePassive(queue, true, false, false, false, nil)
	s.must(err, "passive queue.declare on a new channel after the 404")
}

// publishConfirm: ten persistent messages with properties, each acked by the broker in order
// (NotifyPublish), one more through a deferred confirmation; all consumed with their properties.
func publishConfirm(s *S) {
	const n = 10
	conn := s.dial()
	ch := s.confirmChannel(conn)
	queue := s.queue(ch, "q")
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
	for i := 1; i <= n; i++ {
		s.must(ch.Publish("", queue, false, false, richMessage(i)), "basic.publish")
	}
	for i := 1; i <= n; i++ {
		s.at(fmt.Sprintf("confirm %d", i))
		select {
		case c := <-confirms:
			s.check(c.Ack && c.DeliveryTag == uint64(i), "confirm %d: got tag %d ack=%v", i, c.DeliveryTag, c.Ack)
		case <-time.After(waitLimit):
			s.failf("confirm %d of %d did not arrive within %s", i, n, waitLimit)
		}
	}
	s.publishConfirmed(ch, "", queue, richMessage(n+1))

	deliveries := s.consume(s.channel(conn), queue)
	for i := 1; i <= n+1; i++ {
		d := s.expect(deliveries, fmt.Sprintf(`{"n":%d}`, i), false)
		checkRichMessage(s, d, i)
		s.ack(d, false)
	}
}

func richMessage(i int) amqp.Publishing {
	return amqp.Publishing{
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    fmt.Sprintf("id-%d", i),
		Headers:      amqp.Table{"seq": int32(i), "origin": client},
		Body:         []byte(fmt.Sprintf(`{"n":%d}`, i)),
	}
}

func checkRichMessage(s *S, d amqp.Delivery, i int) {
	s.check(d.ContentType == "application/json" && d.DeliveryMode == amqp.Persistent && d.MessageId == fmt.Sprintf("id-%d", i),
		"message %d: content-type %q delivery-mode %d message-id %q", i, d.ContentType, d.DeliveryMode, d.MessageId)
	s.check(d.Headers["seq"] == int32(i) && d.Headers["origin"] == client,
		"message %d: headers %v, expected seq=%d origin=%s", i, d.Headers, i, client)
}

// consumePrefetchAck: with prefetch 3 and ten messages, a manual-ack consumer holding three
// gets no fourth (a basic.get on another channel finds m4 still in the queue); acking in batches
// with multiple=true, the consumer gets the rest once each, in order.
func consumePrefetchAck(s *S) {
	const prefetch = 3
	conn := s.dial()
	ch := s.channel(conn)
	queue := s.queue(ch, "q")
	s.publishBodies(conn, queue, numbered("m", 1, 10))
	s.must(ch.Qos(prefetch, 0, false), "basic.qos")
	deliveries := s.consume(ch, queue)
	var window []amqp.Delivery
	for _, body := range numbered("m", 1, prefetch) {
		window = append(window, s.expect(deliveries, body, false))
	}

	other := s.channel(conn)
	s.at("basic.get while the consumer holds its prefetch")
	got, ok, err := other.Get(queue, false)
	s.must(err, "basic.get")
	s.check(ok && string(got.Body) == "m4",
		"with prefetch %d and %v unacked, the queue should still hold m4 for basic.get; got ok=%v body %q",
		prefetch, bodiesOf(window), ok, got.Body)
	s.ack(got, false)

	rest := append([]string{}, numbered("m", 5, 10)...)
	s.ack(window[len(window)-1], true)
	for len(rest) > 0 {
		batch := rest
		if len(batch) > prefetch {
			batch = batch[:prefetch]
		}
		rest = rest[len(batch):]
		var last amqp.Delivery
		for _, body := range batch {
			last = s.expect(deliveries, body, false)
		}
		s.ack(last, true)
	}
}

// nackRequeue: a message nacked with requeue comes back redelivered with the same body, then a
// rejected-with-requeue one likewise; one rejected without requeue is gone (the sentinel after
// it arrives instead).
func nackRequeue(s *S) {
	conn := s.dial()
	ch := s.channel(conn)
	queue := s.queue(ch, "q")
	s.must(ch.Qos(1, 0, false), "basic.qos")
	deliveries := s.consume(ch, queue)

	s.publishBodies(conn, queue, []string{"nack-me"})
	s.must(s.expect(deliveries, "nack-me", false).Nack(false, true), "basic.nack requeue")
	s.ack(s.expect(deliveries, "nack-me", true), false)

	s.publishBodies(conn, queue, []string{"reject-me"})
	s.must(s.expect(deliveries, "reject-me", false).Reject(true), "basic.reject requeue")
	s.ack(s.expect(deliveries, "reject-me", true), false)

	s.publishBodies(conn, queue, []string{"drop-me"})
	s.must(s.expect(deliveries, "drop-me", false).Reject(false), "basic.reject without requeue")
	s.publishBodies(conn, queue, []string{"sentinel"})
	s.ack(s.expect(deliveries, "sentinel", false), false)
}

// mandatoryReturn: under confirms, a mandatory publish nothing is bound for comes back as
// basic.return 312 NO_ROUTE with its body and properties, before its basic.ack; a routable
// mandatory publish is acked and delivered, and not returned.
func mandatoryReturn(s *S) {
	conn := s.dial()
	ch := s.confirmChannel(conn)
	exchange, queue := s.boundQueue(ch, amqp.ExchangeDirect, "bound")
	returns := ch.NotifyReturn(make(chan amqp.Return, 2))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 2))

	lost := amqp.Publishing{ContentType: "text/plain", MessageId: "lost-1", Headers: amqp.Table{"k": "v"}, Body: []byte("lost")}
	s.must(ch.Publish(exchange, "nowhere", true, false, lost), "mandatory basic.publish")
	s.expectConfirm(confirms, 1)
	// The broker sends basic.return before basic.ack, and amqp091 hands each to its channel in
	// the order read, so the return is already there once the ack is.
	select {
	case r := <-returns:
		s.check(r.ReplyCode == amqp.NoRoute && r.ReplyText == "NO_ROUTE", "return: %d %q, expected 312 NO_ROUTE", r.ReplyCode, r.ReplyText)
		s.check(r.Exchange == exchange && r.RoutingKey == "nowhere" && string(r.Body) == "lost",
			"return names exchange %q key %q body %q", r.Exchange, r.RoutingKey, r.Body)
		s.check(r.ContentType == "text/plain" && r.MessageId == "lost-1" && r.Headers["k"] == "v",
			"return lost the properties: content-type %q message-id %q headers %v", r.ContentType, r.MessageId, r.Headers)
	default:
		s.failf("the unroutable mandatory publish was acked without a basic.return before the ack")
	}

	s.must(ch.Publish(exchange, "bound", true, false, amqp.Publishing{Body: []byte("kept")}), "mandatory basic.publish")
	s.expectConfirm(confirms, 2)
	select {
	case r := <-returns:
		s.failf("a routable mandatory publish was returned: %d %q", r.ReplyCode, r.ReplyText)
	default:
	}
	s.ack(s.expect(s.consume(s.channel(conn), queue), "kept", false), false)
}

func (s *S) expectConfirm(confirms <-chan amqp.Confirmation, tag uint64) {
	s.at(fmt.Sprintf("confirm %d", tag))
	select {
	case c := <-confirms:
		s.check(c.Ack && c.DeliveryTag == tag, "expected basic.ack %d, got tag %d ack=%v", tag, c.DeliveryTag, c.Ack)
	case <-time.After(waitLimit):
		s.failf("no publisher confirm %d within %s", tag, waitLimit)
	}
}

// basicGet: get-empty on an empty queue; after two publishes a manual-ack get returns the
// first with message-count 1, an auto-ack get the second with message-count 0; then empty.
func basicGet(s *S) {
	conn := s.dial()
	ch := s.channel(conn)
	queue := s.queue(ch, "q")
	s.expectEmpty(ch, queue, "a new queue")
	s.publishBodies(conn, queue, []string{"g1", "g2"})

	first, ok, err := ch.Get(queue, false)
	s.must(err, "basic.get")
	s.check(ok && string(first.Body) == "g1" && first.MessageCount == 1 && !first.Redelivered,
		"first get: ok=%v body %q message-count %d redelivered %v (expected g1, 1, false)", ok, first.Body, first.MessageCount, first.Redelivered)
	s.ack(first, false)
	second, ok, err := ch.Get(queue, true)
	s.must(err, "basic.get no-ack")
	s.check(ok && string(second.Body) == "g2" && second.MessageCount == 0,
		"second get: ok=%v body %q message-count %d (expected g2, 0)", ok, second.Body, second.MessageCount)
	s.expectEmpty(ch, queue, "after both were taken")
}
