//go:build amqp091_recovery

package main

import (
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// amqp091-go 1.13 and later recover by themselves (Config.Recovery): the connection dials
// again, then its channels are reopened with their confirm mode and QoS, and the topology and
// consumers it declared are declared again. Debian's 1.5.0 lacks that API, hence the build tag
// (amqp091_go_module.sh sets it; reconnect_redial.go is the GOPATH build's).

func (s *S) dialForReconnect() *amqp.Connection {
	s.at("dial with recovery")
	conn, err := amqp.DialConfig(s.url, amqp.Config{Locale: "en_US", Recovery: &amqp.Recovery{}})
	s.must(err, "dial "+s.url+" with recovery")
	return s.track(conn)
}

// surviveRestart restarts the server and follows the connection's and the channel's life
// cycle (NotifyStateChange) until both are open again; they are the same objects, recovered.
func (s *S) surviveRestart(conn *amqp.Connection, ch *amqp.Channel) (*amqp.Connection, *amqp.Channel) {
	connState := make(chan *amqp.StateChanged, 16)
	conn.NotifyStateChange(connState)
	chState := make(chan *amqp.StateChanged, 16)
	ch.NotifyStateChange(chState)
	restarted := restartAsync()
	s.expectStates("the connection", connState, amqp.StateReconnecting, amqp.StateOpen)
	s.expectStates("the confirm channel", chState, amqp.StateReconnecting, amqp.StateOpen)
	s.at("waiting for CLOUD_RESTART_CMD")
	s.must(<-restarted, "CLOUD_RESTART_CMD")
	s.check(!conn.IsClosed() && !ch.IsClosed(), "after recovery: connection closed %v, channel closed %v", conn.IsClosed(), ch.IsClosed())
	return conn, ch
}

// expectStates waits for each life-cycle state in turn; recovery takes at most its retries
// (5 by default, 5 s apart).
func (s *S) expectStates(what string, changes <-chan *amqp.StateChanged, states ...amqp.LifeCycleState) {
	const recoveryLimit = waitLimit + 5*amqp.DefaultRetryInterval
	for _, want := range states {
		s.at("waiting for " + what + " to be " + want.String())
		select {
		case change := <-changes:
			s.check(change.To == want, "%s: expected the change to %s, got %v", what, want, change)
		case <-time.After(recoveryLimit):
			s.failf("%s did not become %s within %s of the restart", what, want, recoveryLimit)
		}
	}
}
