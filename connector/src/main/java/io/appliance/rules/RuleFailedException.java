package io.appliance.rules;

/**
 * A rule's {@code when} threw on an event (e.g. {@code assert_true}): the query fails, as it
 * would with the rule compiled into the plan, and the message names the rule.
 */
public final class RuleFailedException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  RuleFailedException(String ruleId, RuntimeException cause) {
    super("rule '" + ruleId + "' failed on an event: " + cause.getMessage(), cause);
  }
}
