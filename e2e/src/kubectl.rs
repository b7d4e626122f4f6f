//! `kubectl olm`, run in the test's process through the plugin's own
//! command-line entry point, as its binary runs it.

use kube::Client;

/// What one run printed on stdout and stderr, and its error.
pub struct Run {
    /// Standard output.
    pub out: String,
    /// Standard error.
    pub err: String,
    /// Why it failed, if it did.
    pub error: Option<kubectl_olm::Error>,
}

impl Run {
    /// What it printed, panicking with both streams when it failed.
    pub fn ok(self) -> String {
        if let Some(error) = &self.error {
            panic!(
                "kubectl olm failed: {error}\nstdout:\n{}\nstderr:\n{}",
                self.out, self.err
            );
        }
        self.out
    }
}

/// Runs `kubectl olm ARGS` as `client`'s user.
pub async fn kubectl_olm(client: &Client, args: &[&str]) -> Run {
    let argv = std::iter::once("kubectl-olm").chain(args.iter().copied());
    let cli = kubectl_olm::Cli::parse_from_args(argv).expect("valid arguments");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let error = cli.run(client.clone(), &mut out, &mut err, false).await.err();
    Run {
        out: String::from_utf8(out).expect("utf-8"),
        err: String::from_utf8(err).expect("utf-8"),
        error,
    }
}
