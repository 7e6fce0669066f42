//go:build !amqp091_recovery

package main

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Debian's amqp091-go (1.5.0) has no recovery of its own: its users watch NotifyClose and dial
// again. The module build (amqp091_go_module.sh) sets the tag amqp091_recovery instead.

func (s *S) dialForReconnect() *amqp.Connection { return s.dial() }

// surviveRestart restarts the server, checks the client saw the server's connection.close 320
// through NotifyClose, and dials again: a new connection and a new confirm-mode channel.
func (s *S) surviveRestart(conn *amqp.Connection, _ *amqp.Channel) (*amqp.Connection, *amqp.Channel) {
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	restarted := restartAsync()
	s.at("waiting for the server to close the connection")
	select {
	case e := <-closed:
		s.check(e != nil && e.Code == amqp.ConnectionForced && e.Server,
			"on restart expected the server's connection.close 320 CONNECTION_FORCED, got %v", e)
	case <-time.After(waitLimit):
		s.failf("the connection was not closed within %s of the restart", waitLimit)
	}
	s.at("waiting for CLOUD_RESTART_CMD")
	s.must(<-restarted, "CLOUD_RESTART_CMD")
	conn = s.redial()
	return conn, s.confirmChannel(conn)
}

// redial dials until the server accepts again, as an amqp091 user's reconnect loop does.
func (s *S) redial() *amqp.Connection {
	s.at("redialling")
	deadline := time.Now().Add(waitLimit)
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		conn, err := amqp.Dial(s.url)
		if err == nil {
			return s.track(conn)
		}
		s.check(time.Now().Before(deadline), "could not reconnect within %s: %v", waitLimit, err)
		time.Sleep(delay) // a retry's backoff, not an assertion
	}
}

func min(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}
