//! mkb-agent: LLM providers, the agent loop, tools, budgets and distillation.

pub mod provider;
pub use provider::{Provider, ProviderConfig, ProviderError, Session};

pub mod agent;
pub mod skill;
pub mod tools;

pub use agent::{run_attempt, AttemptError, AttemptOutcome, AttemptSpec, ToolEval};
