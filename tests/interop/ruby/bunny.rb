# Client `bunny` of the interop matrix (tests/interop/README.md): Debian's ruby-bunny 2.19, used
# the way its guides (rubybunny.info) show, against cloud's AMQP port (AMQP_URL). Prints one
# RESULT line per scenario; exits non-zero iff one failed.
require "bunny"
require "timeout"

$stdout.sync = true
CLIENT = "bunny"
BUNNY_ORIGIN = Bunny.method(:new).source_location.first.start_with?("/usr/") ? "Debian" : "RubyGems"
puts "LIBRARY #{CLIENT} bunny #{Bunny::VERSION} (#{BUNNY_ORIGIN})"
# Every wait for an event (a delivery, a confirm, a return, a recovery) is bounded, so that a
# missing event becomes a `fail` rather than a hang; a sanitized server is slow, hence generous.
WAIT = 30
SCENARIO_LIMIT = 120

class Failure < StandardError; end

def check(ok, message)
  raise Failure, message unless ok
end

def within(what, seconds = WAIT, &block)
  Timeout.timeout(seconds, &block)
rescue Timeout::Error
  raise Failure, "#{what}: nothing within #{seconds}s"
end

# A manual-ack consumer (queue.subscribe) whose deliveries the scenario takes one at a time.
class Inbox
  def initialize(queue)
    @deliveries = Queue.new
    queue.subscribe(manual_ack: true) { |info, props, body| @deliveries << [info, props, body] }
  end

  def take(what)
    within("waiting for #{what}") { @deliveries.pop }
  end

  # The next delivery, checked for its body and redelivered flag: [delivery_info, properties].
  def expect(body, redelivered: false)
    info, props, got = take(body.inspect)
    check(got == body && info.redelivered? == redelivered,
          "expected #{body.inspect} redelivered=#{redelivered}, got #{got.inspect} redelivered=#{info.redelivered?}")
    [info, props]
  end
end

# One scenario's run: its names and the connections it opened, closed when it ends.
class Scenario
  def initialize(name)
    @name = name
    @connections = []
  end

  def run
    within("the whole scenario", SCENARIO_LIMIT) { send(@name) }
    "pass"
  rescue Failure => e
    "fail #{e.message}"
  rescue StandardError => e
    "fail #{e.class}: #{e.message}"
  ensure
    @connections.each { |c| c.close if c.open? rescue nil }
  end

  private

  def connect(**opts)
    conn = Bunny.new(ENV.fetch("AMQP_URL"), log_output: $stderr, log_level: :warn, **opts)
    @connections << conn
    conn.start
  end

  # An exchange or queue name of this scenario: one subject word beginning with the client name.
  def named(suffix)
    "#{CLIENT}-#{@name}-#{suffix}"
  end

  def durable_queue(ch, suffix)
    ch.queue(named(suffix), durable: true)
  end

  def confirm!(ch, what)
    check(within("confirm of #{what}") { ch.wait_for_confirms }, "#{what}: basic.nack for #{ch.nacked_set.to_a}")
  end

  # Publishes persistent messages to a queue, each confirmed, on a channel of their own.
  def publish_all(conn, queue_name, bodies)
    ch = conn.create_channel
    ch.confirm_select
    bodies.each { |body| ch.default_exchange.publish(body, routing_key: queue_name, persistent: true) }
    confirm!(ch, bodies.inspect)
    ch.close
  end

  def numbered(range)
    range.map { |i| "m#{i}" }
  end

  # -- the scenarios ------------------------------------------------------------------------

  # A durable topic exchange and a queue bound with a wildcard; passive declares find them (and
  # not a missing queue); a matching publish arrives, the one between it and a sentinel does not.
  def declare
    conn = connect
    ch = conn.create_channel
    x = ch.topic(named("x"), durable: true)
    q = durable_queue(ch, "q").bind(x, routing_key: "stock.*.eu")
    check(conn.exchange_exists?(x.name) && conn.queue_exists?(q.name), "a passive re-declare failed")
    check(!conn.queue_exists?(named("missing")), "a passive declare of a missing queue succeeded")
    %w[stock.sap.eu stock.sap.us stock.ibm.eu].each { |key| x.publish(key, routing_key: key) }
    inbox = Inbox.new(q)
    info, = inbox.expect("stock.sap.eu")
    check(info.exchange == x.name && info.routing_key == "stock.sap.eu",
          "delivery names exchange #{info.exchange.inspect} key #{info.routing_key.inspect}")
    info, = inbox.expect("stock.ibm.eu")
    ch.ack(info.delivery_tag, true)
  end

  # confirm_select + wait_for_confirms over ten persistent messages with properties; all
  # consumed with their properties intact.
  def publish_confirm
    conn = connect
    ch = conn.create_channel
    ch.confirm_select
    q = durable_queue(ch, "q")
    (1..10).each { |i| ch.default_exchange.publish(%({"n":#{i}}), routing_key: q.name, **rich(i)) }
    confirm!(ch, "ten publishes")
    check(ch.unconfirmed_set.empty?, "unconfirmed after wait_for_confirms: #{ch.unconfirmed_set.to_a}")
    inbox = Inbox.new(q)
    (1..10).each do |i|
      info, props = inbox.expect(%({"n":#{i}}))
      check_rich(props, i)
      ch.ack(info.delivery_tag)
    end
  end

  def rich(i)
    { persistent: true, content_type: "application/json", message_id: "id-#{i}",
      headers: { "seq" => i, "origin" => CLIENT } }
  end

  def check_rich(props, i)
    check(props.content_type == "application/json" && props.delivery_mode == 2 && props.message_id == "id-#{i}",
          "message #{i}: content-type #{props.content_type.inspect} delivery-mode #{props.delivery_mode} " \
          "message-id #{props.message_id.inspect}")
    check(props.headers == { "seq" => i, "origin" => CLIENT }, "message #{i}: headers #{props.headers.inspect}")
  end

  # channel.prefetch(3): holding three unacked, the consumer gets no fourth (queue.pop on another
  # channel finds m4 still queued); acking in batches (multiple), the rest arrive once, in order.
  def consume_prefetch_ack
    conn = connect
    ch = conn.create_channel
    q = durable_queue(ch, "q")
    publish_all(conn, q.name, numbered(1..10))
    ch.prefetch(3)
    inbox = Inbox.new(q)
    window = numbered(1..3).map { |body| inbox.expect(body).first }
    other = conn.create_channel
    info, _, body = other.queue(q.name, durable: true).pop(manual_ack: true)
    check(body == "m4", "with prefetch 3 and m1..m3 unacked, queue.pop should find m4; got #{body.inspect}")
    other.ack(info.delivery_tag)
    ch.ack(window.last.delivery_tag, true)
    numbered(5..10).each_slice(3) do |batch|
      last = batch.map { |b| inbox.expect(b).first }.last
      ch.ack(last.delivery_tag, true)
    end
  end

  # nack and reject with requeue bring the message back redelivered; reject without requeue
  # drops it (the sentinel published after it arrives instead).
  def nack_requeue
    conn = connect
    ch = conn.create_channel
    q = durable_queue(ch, "q")
    ch.prefetch(1)
    inbox = Inbox.new(q)
    publish_all(conn, q.name, ["nack-me"])
    ch.nack(inbox.expect("nack-me").first.delivery_tag, false, true)
    ch.ack(inbox.expect("nack-me", redelivered: true).first.delivery_tag)
    publish_all(conn, q.name, ["reject-me"])
    ch.reject(inbox.expect("reject-me").first.delivery_tag, true)
    ch.ack(inbox.expect("reject-me", redelivered: true).first.delivery_tag)
    publish_all(conn, q.name, ["drop-me"])
    ch.reject(inbox.expect("drop-me").first.delivery_tag, false)
    publish_all(conn, q.name, ["sentinel"])
    ch.ack(inbox.expect("sentinel").first.delivery_tag)
  end

  # exchange.on_return under confirms: an unroutable mandatory publish is returned (312
  # NO_ROUTE, body and properties intact) before it is acked; a routable one is acked, not
  # returned, and delivered.
  def mandatory_return
    conn = connect
    ch = conn.create_channel
    ch.confirm_select
    x = ch.direct(named("x"))
    q = durable_queue(ch, "q").bind(x, routing_key: "bound")
    returned = Queue.new
    x.on_return { |info, props, body| returned << [info, props, body] }
    x.publish("lost", routing_key: "nowhere", mandatory: true, content_type: "text/plain",
                      message_id: "lost-1", headers: { "k" => "v" })
    confirm!(ch, "the unroutable mandatory publish")
    # bunny runs on_return in its reader loop, which reads the return before the ack.
    check(!returned.empty?, "the unroutable mandatory publish was acked without a basic.return first")
    check_return(*returned.pop)
    x.publish("kept", routing_key: "bound", mandatory: true)
    confirm!(ch, "the routable mandatory publish")
    check(returned.empty?, "a routable mandatory publish was returned")
    ch.ack(Inbox.new(q).expect("kept").first.delivery_tag)
  end

  def check_return(info, props, body)
    check(info.reply_code == 312 && info.reply_text == "NO_ROUTE",
          "return: #{info.reply_code} #{info.reply_text.inspect}, expected 312 NO_ROUTE")
    check(info.exchange == named("x") && info.routing_key == "nowhere" && body == "lost",
          "return names exchange #{info.exchange.inspect} key #{info.routing_key.inspect} body #{body.inspect}")
    check(props.content_type == "text/plain" && props.message_id == "lost-1" && props.headers == { "k" => "v" },
          "return lost the properties: #{props.to_h.inspect}")
  end

  # queue.pop: nothing on a new queue; after two publishes a manual-ack pop returns the first
  # and leaves one message (bunny's GetResponse does not expose get-ok's message-count: its idiom
  # is queue.message_count), an automatic-ack pop the second and leaves none; then nothing.
  def basic_get
    conn = connect
    ch = conn.create_channel
    q = durable_queue(ch, "q")
    check(q.pop == [nil, nil, nil], "pop on a new queue returned a message")
    publish_all(conn, q.name, %w[g1 g2])
    info, _, body = q.pop(manual_ack: true)
    check(body == "g1" && !info.redelivered, "first pop: #{body.inspect} redelivered=#{info&.redelivered} (expected g1)")
    check(q.message_count == 1, "after the first pop queue.message_count is #{q.message_count}, expected 1")
    ch.ack(info.delivery_tag)
    _, _, body = q.pop
    check(body == "g2" && q.message_count.zero?, "second pop: #{body.inspect}, then message_count #{q.message_count} (expected g2, 0)")
    check(q.pop == [nil, nil, nil], "pop after both were taken returned a message")
  end

  # A confirmed persistent message survives a server restart; bunny's automatic recovery
  # (recover_from_connection_close, on by default) reconnects on the server's 320 and recovers
  # the channel, its confirm mode and the queue; the message is then consumed, and another too.
  def reconnect
    conn = connect(network_recovery_interval: 0.5)
    recovered = Queue.new
    conn.after_recovery_completed { recovered << true }
    ch = conn.create_channel
    ch.confirm_select
    q = ch.queue("#{CLIENT}-reconnect", durable: true)
    q.publish("before", persistent: true)
    confirm!(ch, "before")
    restart = Thread.new { system("sh", "-c", ENV.fetch("CLOUD_RESTART_CMD")) }
    within("automatic recovery after the restart") { recovered.pop }
    check(within("CLOUD_RESTART_CMD") { restart.value }, "CLOUD_RESTART_CMD failed")
    inbox = Inbox.new(q)
    ch.ack(inbox.expect("before").first.delivery_tag)
    q.publish("after", persistent: true)
    confirm!(ch, "after")
    ch.ack(inbox.expect("after").first.delivery_tag)
  end
end

# reconnect restarts the server, so it runs last.
SCENARIOS = %w[declare publish_confirm consume_prefetch_ack nack_requeue mandatory_return basic_get reconnect].freeze

verdicts = SCENARIOS.map do |name|
  verdict = Scenario.new(name).run
  puts "RESULT #{CLIENT} #{name} #{verdict.gsub(/\s+/, ' ')}"
  verdict
end
exit(verdicts.all? { |v| v == "pass" } ? 0 : 1)
