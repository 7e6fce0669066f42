package main

import (
	"fmt"
	"os"
	"os/exec"

	amqp "github.com/rabbitmq/amqp091-go"
)

// reconnect: a confirmed persistent message survives a server restart. The client sees the
// server close the connection and gets a working one back, by the library's own recovery where
// the release has one (reconnect_recovery.go) or by dialling again (reconnect_redial.go); it
// gets the message, then publishes another with a confirm and consumes it.
func reconnect(s *S) {
	conn := s.dialForReconnect()
	ch := s.confirmChannel(conn)
	queue := client + "-reconnect"
	_, err := ch.QueueDeclare(queue, true, false, false, false, nil)
	s.must(err, "queue.declare "+queue)
	s.publishConfirmed(ch, "", queue, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("before")})

	conn, ch = s.surviveRestart(conn, ch)
	deliveries := s.consume(s.channel(conn), queue)
	s.ack(s.expect(deliveries, "before", false), false)
	s.publishConfirmed(ch, "", queue, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("after")})
	s.ack(s.expect(deliveries, "after", false), false)
}

// restartAsync runs CLOUD_RESTART_CMD beside the scenario, which meanwhile watches its
// connection go and come back; the channel gets the command's outcome.
func restartAsync() <-chan error {
	restarted := make(chan error, 1)
	go func() {
		out, err := exec.Command("sh", "-c", os.Getenv("CLOUD_RESTART_CMD")).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, out)
		}
		restarted <- err
	}()
	return restarted
}
