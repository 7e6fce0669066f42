"""pika (python3-pika, a stock RabbitMQ client) against the amqp listener: connect, read the
server's capabilities, open and close a channel, close the connection. Usage: pika_connect.py PORT
Exit status 0 only if every step behaved as a RabbitMQ broker would."""
import sys

import pika


def main() -> int:
    port = int(sys.argv[1])
    params = pika.ConnectionParameters(host="127.0.0.1", port=port, heartbeat=10,
                                       blocked_connection_timeout=10, socket_timeout=10)
    connection = pika.BlockingConnection(params)
    capabilities = connection._impl.server_capabilities  # what connection.start offered
    for claimed in ("publisher_confirms", "basic.nack", "consumer_cancel_notify"):
        if capabilities.get(claimed) is not True:
            print(f"capability {claimed} is {capabilities.get(claimed)!r}, expected True")
            return 1
    channel = connection.channel()
    if not channel.is_open:
        print("channel did not open")
        return 1
    channel.close()
    if not channel.is_closed:
        print("channel did not close")
        return 1
    second = connection.channel()
    second.close()
    connection.close()
    if not connection.is_closed:
        print("connection did not close")
        return 1
    print("pika: connected, opened and closed channels, closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
