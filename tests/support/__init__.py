"""What the tests share, in one place: test modules import helpers only from here, never from one another
(tests/test_support_imports.py checks it).

- `openai_server`, `fault_server`, `batch_server`, `redis_server`: local servers (real HTTP) standing in for a
  provider, a faulty or hostile provider, a batch API and Redis;
- `browser`: a headless Chromium page for the viewer;
- `fakes`: fakes for unit tests (named as such);
- `configs`: the resolved config the runner would run, composed by Hydra;
- `runners`: a study run through the CLI in a subprocess, or `run_study` in this process;
- `studies`: a small real study over the local server, `cli_env`, `public_data`;
- `study_folders`: planted study folders (fake runs) for analysis tests;
- `logprobs`: planted token log-probabilities for the expected-score tests.
"""
