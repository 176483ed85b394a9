"""How a call fails: `Permanent` is not retried; any other exception is."""


class Permanent(Exception):
    """A failure retrying cannot fix (bad input, a refused credential, a missing package).

    Sent as gRPC ABORTED: manent fails the target without another attempt. Any other exception
    from a call is sent as UNKNOWN, which manent retries (per `max_retries`), and a
    `grpclib.exceptions.GRPCError` raised by the plugin is sent as it is.
    """
