//! `machine-agent`: see the library's docs.

use clap::Parser;
use machine_agent::{
    cli::{Cli, Command, HookCommand},
    hook_tool,
};

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(machine_agent::agent::run(*args))),
        Command::Hook(HookCommand::StatusSet { state, message }) => {
            hook_tool::call(hook_tool::Command::StatusSet { state, message })
        }
        Command::Hook(HookCommand::Log { message }) => hook_tool::call(hook_tool::Command::Log { message }),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("machine-agent: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
