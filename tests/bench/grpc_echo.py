# The gRPC server and a one-call client of tests/bench/run's section "grpc":
# python3-grpcio. The server (asyncio API, one process, no TLS: an h2c port):
# lizard.bench.B/Echo answers the request's bytes (a unary call), Calls how
# many Echo calls it has served (in decimal), so that the bench can check that
# every call h2load counted reached the app. The client makes one call and
# prints its answer (exit status 1 and the status on an error).
# Usage: grpc_echo.py serve PORT READY_FILE
#        grpc_echo.py call ADDR AUTHORITY CAFILE|- TOKEN METHOD PAYLOAD
import asyncio, os, sys

import grpc

calls = 0


async def echo(req, ctx):
    global calls
    calls += 1
    return req


async def count(req, ctx):
    return b"%d" % calls


def call(addr, authority, cafile, token, method, payload):
    opts = [("grpc.default_authority", authority)]
    if cafile == "-":
        ch = grpc.insecure_channel(addr, options=opts)
    else:
        creds = grpc.ssl_channel_credentials(root_certificates=open(cafile, "rb").read())
        ch = grpc.secure_channel(addr, creds, options=opts + [("grpc.ssl_target_name_override", authority)])
    try:
        out = ch.unary_unary("/lizard.bench.B/" + method)(payload.encode(), timeout=10,
                                                           metadata=[("x-lizard-access-token", token)])
    except grpc.RpcError as e:
        print("%s: %s" % (e.code(), e.details()))
        sys.exit(1)
    print(out.decode(errors="replace"))


async def serve(port, ready):
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("lizard.bench.B", {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "Calls": grpc.unary_unary_rpc_method_handler(count),
    }),))
    server.add_insecure_port("127.0.0.1:%d" % port)
    await server.start()
    with open(ready + ".tmp", "w") as f:
        f.write("listening\n")
    os.rename(ready + ".tmp", ready)
    await server.wait_for_termination()


if sys.argv[1] == "serve":
    asyncio.run(serve(int(sys.argv[2]), sys.argv[3]))
else:
    call(*sys.argv[2:8])
