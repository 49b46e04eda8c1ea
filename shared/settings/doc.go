// Package settings is what every configuration reader stands on: Env, which
// reads environment variables and collects one problem per bad variable,
// each naming it, so a misconfigured Lambda dies at init with every mistake
// listed instead of refusing webhooks one by one; LOG_LEVEL; and the
// loggers (JSON for the Lambdas, a readable line for a person).
//
// It is a leaf, standard library only. Each component reads its own
// variables in a ConfigFromEnv beside its Config (receiver, processor,
// archive, blobstore, storage's pool), so a function links only the
// components it runs.
package settings
