//! The control socket's request parser (`linegate::control::protocol::parse_request`).
//!
//! Properties: never a panic; a line of `REQUEST_MAX` bytes or more is `TooLong`; a request that
//! parses is of this protocol's version, and written out again as a client writes it
//! (`Request::to_line`, without its newline) it parses to the same request; a JSON object whose
//! `v` is another number is refused as `Version`, whatever else it holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use linegate::control::protocol::{parse_request, BadRequest, REQUEST_MAX, VERSION};

fuzz_target!(init: linegate_fuzz::write_seeds(linegate_fuzz::control_requests), |data: &[u8]| {
    let verdict = parse_request(data);
    if data.len() >= REQUEST_MAX {
        assert_eq!(verdict, Err(BadRequest::TooLong));
        return;
    }
    match &verdict {
        Ok(request) => {
            assert_eq!(request.v, VERSION);
            let _ = (request.command.name(), request.command.mutates());
            let line = request.to_line();
            assert_eq!(line.last(), Some(&b'\n'));
            let line = &line[..line.len() - 1];
            if line.len() < REQUEST_MAX {
                assert_eq!(parse_request(line).as_ref(), Ok(request), "re-sent request differs");
            }
        }
        Err(BadRequest::Version(v)) => assert_ne!(*v, VERSION),
        Err(BadRequest::TooLong) => panic!("TooLong for {} bytes", data.len()),
        Err(BadRequest::Malformed(_)) => {}
    }
});
