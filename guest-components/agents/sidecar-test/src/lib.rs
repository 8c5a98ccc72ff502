//! `sidecar-test`: an agent for the tests of `wasbox sidecar serve`, not shipped. What it does
//! is the request's prompt: `spin` loops in its own code forever (until cancelled), `fail`
//! ends with a failure, `crash` traps, `unlisted` asks for a tool the request does not offer;
//! `describe` traps for the locale `crash`.

wit_bindgen::generate!({
    path: "../../../wit/sidecar",
    world: "agent",
    generate_all,
});

use wasbox::sidecar::host;

struct TestAgent;

impl Guest for TestAgent {
    fn describe(locale: String) -> Template {
        if locale == "crash" {
            panic!("describe crashed on purpose");
        }
        Template {
            id: "sidecar-test".into(),
            name: "Test agent".into(),
            description: "Spins, fails or crashes on request.".into(),
            version: "0.0.1".into(),
            parameters: Vec::new(),
            tools: Vec::new(),
        }
    }

    fn run(request: Request) -> Result<Completion, Failure> {
        match request.prompt.as_deref().unwrap_or("") {
            "spin" => {
                host::thought("spinning");
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "fail" => Err(Failure {
                error_code: "NOT_TODAY".into(),
                message: "failed on purpose".into(),
                details_json: Some("{\"why\":\"asked to\"}".into()),
            }),
            "crash" => panic!("crashed on purpose"),
            "unlisted" => match host::call_tool("not-offered", "{}", 5) {
                Ok(_) => Ok(Completion {
                    response: "the host ran a tool it did not offer".into(),
                    metadata_json: None,
                }),
                Err(e) => Ok(Completion {
                    response: format!("refused: {e}"),
                    metadata_json: None,
                }),
            },
            other => Ok(Completion {
                response: format!("you said: {other}"),
                metadata_json: None,
            }),
        }
    }
}

export!(TestAgent);
