"""An independent Sparkplug B host application for tests/sparkplug.rs, built on pysparkplug (PyPI),
which decodes every payload with its own protobuf code.

    host.py HOST PORT GROUP HOST_ID

Subscribes to spBv1.0/GROUP/# and prints one JSON line per message received, in order:
{"type", "node", "device", "seq", "bd_seq", "timestamp", "metrics": [{"name", "alias",
"value", "timestamp", "historical", "null"}], "raw": the payload in base64}. DDATA metric
names are resolved through the device's last DBIRTH by pysparkplug's own alias table; a message
that does not decode, or a DDATA with an alias no birth declared, prints {"type": "ERROR"}.
Prints {"type": "READY"} once subscribed.

Reads commands, one per line, on stdin:
  online | offline     publish this host's retained STATE (spBv1.0/STATE/HOST_ID)
  rebirth NODE         publish an NCMD "Node Control/Rebirth" = true to NODE
  quit                 disconnect and exit
"""

import base64
import datetime
import json
import sys
import threading

import pysparkplug as psp

DECODERS = {
    "NBIRTH": psp.NBirth,
    "DBIRTH": psp.DBirth,
    "DDATA": psp.DData,
    "NDEATH": psp.NDeath,
}


def metric(m) -> dict:
    value = m.value
    if isinstance(value, bytes):
        value = base64.b64encode(value).decode()
    elif isinstance(value, datetime.datetime):  # a DateTime metric: back to epoch ms
        value = round(value.timestamp() * 1000)
    return {
        "name": m.name,
        "alias": m.alias,
        "value": value,
        "timestamp": m.timestamp,
        "historical": m.is_historical,
        "null": m.is_null,
    }


def main() -> None:
    host, port, group, host_id = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    births = {}
    lock = threading.Lock()

    def emit(obj) -> None:
        with lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    def on_message(_client, _userdata, message) -> None:
        try:
            topic = psp.Topic.from_str(message.topic)
            kind = str(topic.message_type)
            decoder = DECODERS.get(kind)
            if decoder is None:
                return
            key = (topic.edge_node_id, topic.device_id)
            if kind == "DDATA":
                if key not in births:
                    raise ValueError("DDATA before any DBIRTH of its device")
                payload = decoder.decode(message.payload, birth=births[key])
            else:
                payload = decoder.decode(message.payload)
            out = {
                "type": kind,
                "node": topic.edge_node_id,
                "device": topic.device_id,
                "raw": base64.b64encode(message.payload).decode(),
            }
            if kind == "NDEATH":
                out["bd_seq"] = payload.bd_seq_metric.value
                out["metrics"] = [metric(payload.bd_seq_metric)]
            else:
                out["seq"] = payload.seq
                out["timestamp"] = payload.timestamp
                out["metrics"] = [metric(m) for m in payload.metrics]
            if kind in ("NBIRTH", "DBIRTH"):
                births[key] = payload
            if kind == "NBIRTH":
                out["bd_seq"] = next(m.value for m in payload.metrics if m.name == "bdSeq")
        except Exception as e:  # anything that does not decode fails the test
            out = {"type": "ERROR", "topic": message.topic, "error": repr(e)}
        emit(out)

    # pysparkplug's client wraps paho; its own subscribe decodes into its types, we want the
    # raw bytes beside them, so the subscription goes through its paho client.
    client = psp.Client(client_id=f"{host_id}-test-host")
    paho = client._client
    subscribed = threading.Event()
    paho.on_subscribe = lambda *_args: subscribed.set()
    paho.on_message = on_message

    def on_connect(_client) -> None:
        paho.subscribe(f"spBv1.0/{group}/#", qos=1)

    client.connect(host, port=port, blocking=False, callback=on_connect)
    if not subscribed.wait(10):
        emit({"type": "ERROR", "error": "no SUBACK in 10 s"})
        sys.exit(1)
    emit({"type": "READY"})

    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] in ("online", "offline"):
            online = words[0] == "online"
            state = psp.State(timestamp=psp.get_current_timestamp(), online=online)
            info = paho.publish(f"spBv1.0/STATE/{host_id}", state.encode(), qos=1, retain=True)
            info.wait_for_publish(10)
            emit({"type": "STATE_SENT", "online": online})
        elif words[0] == "rebirth":
            now = psp.get_current_timestamp()
            rebirth = psp.Metric(
                timestamp=now,
                name="Node Control/Rebirth",
                datatype=psp.DataType.BOOLEAN,
                value=True,
            )
            cmd = psp.NCmd(timestamp=now, metrics=(rebirth,))
            info = paho.publish(
                f"spBv1.0/{group}/NCMD/{words[1]}", cmd.encode(include_dtypes=True), qos=0
            )
            info.wait_for_publish(10)
            emit({"type": "REBIRTH_SENT", "at": now})
        elif words[0] == "quit":
            break
    client.disconnect()


if __name__ == "__main__":
    main()
