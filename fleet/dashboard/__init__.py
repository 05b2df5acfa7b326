"""`fleet dashboard`: a read-only web page of the fleet, its members, jobs, quotas and
Reservations, kept live by watches and pushed to the browser as server-sent events.

- `views/`: pure functions from Kubernetes objects (and the core's snapshots) to JSON-able
  dicts; every number comes from the same helpers the controller uses (fleet.core, fleet.api).
- `state.py`: what the watches have seen, fleet-wide and per member.
- `watch.py`: the informers that fill it (members reached as `kubectl amc` reaches them).
- `server.py`: the aiohttp app: the page, its JSON, the event stream, a job's log.
- `assets/`: plain HTML, CSS and JavaScript, shipped in the package.
"""
