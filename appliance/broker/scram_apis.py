"""SCRAM users through Kafka's admin API (KIP-554): Describe/AlterUserScramCredentials.

``kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users``,
``Admin.alterUserScramCredentials`` and confluent-kafka's
``AdminClient.alter_user_scram_credentials`` send a salted password the client derived
(PBKDF2 of the password, the salt, the iterations); the broker keeps only the StoredKey
and ServerKey it implies, in the users file (``--sasl-users``, else the data directory's
``users.toml``), written atomically (mode 0600) and in force for the next login, as
``appliance broker-user add`` does offline. A broker with a data directory keeps its users
there even while it listens without SASL, for when it does. Only a broker with neither a
users file nor a data directory has no users to manage: SECURITY_DISABLED, as Kafka
answers ACL calls without an authorizer.

Kafka's rules and errors: one change per user and mechanism per request
(DUPLICATE_RESOURCE), 4096 to 16384 iterations (UNACCEPTABLE_CREDENTIAL), SCRAM-SHA-256
and -512 only (UNSUPPORTED_SASL_MECHANISM), deleting a credential that does not exist is
RESOURCE_NOT_FOUND; describing shows mechanisms and iterations, never a key.
"""

from __future__ import annotations

from collections import Counter

from appliance.broker.acl import needs
from appliance.broker.acl.authorizer import Authorizer
from appliance.broker.acl.model import CLUSTER_NAME
from appliance.broker.caller import Caller
from appliance.broker.security.credentials import Users, save_users
from appliance.broker.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential
from appliance.broker.settings import BrokerConfig
from appliance.broker.wire import errors
from appliance.logs import get_logger

log = get_logger("appliance.broker")
MAX_ITERATIONS = 16384  # Kafka refuses more
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism
CODE_OF = {name: code for code, name in MECHANISM_CODES.items()}
NO_USERS_FILE = ("this broker keeps no users: start it with --data-dir (or a SASL "
                 "listener and --sasl-users) to manage SCRAM users")


class ScramApis:
    def __init__(self, config: BrokerConfig, users: Users | None,
                 authorizer: Authorizer) -> None:
        self.config = config
        self.users = users  # the listener's, shared: a change is in force at once
        self.authorizer = authorizer

    def describe_user_scram_credentials(self, version: int, req: dict, caller: Caller):
        if not self.authorizer.allows(caller, needs.DESCRIBE_USER_SCRAM_CREDENTIALS,
                                      CLUSTER_NAME):
            return {"throttle_time_ms": 0, "error_code": errors.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": f"{caller.principal} may not DESCRIBE the cluster",
                    "results": []}
        users = self.users
        known = users.scram if users is not None else {}
        asked = [u["name"] for u in req["users"]] if req["users"] is not None else None
        names = sorted(known) if asked is None else asked
        twice = {n for n, count in Counter(names).items() if count > 1}
        results = []
        for name in dict.fromkeys(names):
            if name in twice:
                results.append({"user": name, "error_code": errors.DUPLICATE_RESOURCE,
                                "error_message": f"user {name!r} asked for twice",
                                "credential_infos": []})
            elif name not in known:
                results.append({"user": name, "error_code": errors.RESOURCE_NOT_FOUND,
                                "error_message": f"no SCRAM credentials for {name!r}",
                                "credential_infos": []})
            else:
                results.append({"user": name, "error_code": errors.NONE,
                                "error_message": None, "credential_infos": [
                                    {"mechanism": CODE_OF[mech],
                                     "iterations": cred.iterations}
                                    for mech, cred in sorted(known[name].items())
                                    if mech in CODE_OF]})
        return {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None,
                "results": results}

    def alter_user_scram_credentials(self, version: int, req: dict, caller: Caller):
        changes = ([("delete", d["name"], d["mechanism"], d) for d in req["deletions"]]
                   + [("upsert", u["name"], u["mechanism"], u) for u in req["upsertions"]])
        users_in_order = list(dict.fromkeys(name for _, name, _, _ in changes))
        refusal = self._refusal(caller)
        if refusal is not None:
            code, message = refusal
            return {"throttle_time_ms": 0, "results": [
                {"user": name, "error_code": code, "error_message": message}
                for name in users_in_order]}
        users = self.users
        assert users is not None  # no refusal: there is a users file
        per_key = Counter((name, mech) for _, name, mech, _ in changes)
        outcome: dict[str, tuple[int, str | None]] = {}
        staged = {name: dict(users.scram.get(name, {})) for name in users_in_order}
        for kind, name, code, change in changes:
            if name in outcome:
                continue  # the user's first failure is its answer; nothing of it applies
            failed = self._invalid(kind, name, code, change, staged[name], per_key)
            if failed is not None:
                outcome[name] = failed
                continue
            mech = MECHANISM_CODES[code]
            if kind == "delete":
                del staged[name][mech]
            else:
                staged[name][mech] = ScramCredential.from_salted(
                    MECHANISMS[mech], bytes(change["salt"]), change["iterations"],
                    bytes(change["salted_password"]))
        applied = [name for name in users_in_order if name not in outcome]
        if applied:
            before = {name: users.scram.get(name) for name in applied}
            for name in applied:
                if staged[name]:
                    users.scram[name] = staged[name]
                else:
                    users.scram.pop(name, None)
            try:
                assert self.config.users_path is not None
                save_users(self.config.users_path, users)
            except OSError as exc:
                for name, old in before.items():  # not written: not in force either
                    if old is None:
                        users.scram.pop(name, None)
                    else:
                        users.scram[name] = old
                log.error("broker.users_write_failed", error=str(exc))
                outcome.update({name: (errors.UNKNOWN_SERVER_ERROR, str(exc))
                                for name in applied})
            else:
                log.info("broker.scram_users_altered", principal=caller.principal,
                         users=applied)
        return {"throttle_time_ms": 0, "results": [
            {"user": name, "error_code": outcome.get(name, (errors.NONE, None))[0],
             "error_message": outcome.get(name, (errors.NONE, None))[1]}
            for name in users_in_order]}

    def _refusal(self, caller: Caller) -> tuple[int, str] | None:
        if not self.authorizer.allows(caller, needs.ALTER_USER_SCRAM_CREDENTIALS,
                                      CLUSTER_NAME):
            return errors.CLUSTER_AUTHORIZATION_FAILED, (
                f"{caller.principal} may not ALTER the cluster")
        if self.users is None or self.config.users_path is None:
            return errors.SECURITY_DISABLED, NO_USERS_FILE
        return None

    @staticmethod
    def _invalid(kind: str, name: str, code: int, change: dict, current: dict,
                 per_key: Counter) -> tuple[int, str] | None:
        if not name:
            return errors.UNACCEPTABLE_CREDENTIAL, "user name must not be empty"
        if code not in MECHANISM_CODES:
            return errors.UNSUPPORTED_SASL_MECHANISM, (
                f"mechanism {code}: want 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)")
        mech = MECHANISM_CODES[code]
        if per_key[(name, code)] > 1:
            return errors.DUPLICATE_RESOURCE, f"{mech} of {name!r} changed twice"
        if kind == "delete":
            if mech not in current:
                return errors.RESOURCE_NOT_FOUND, f"{name!r} has no {mech} credential"
            return None
        if not MIN_ITERATIONS <= change["iterations"] <= MAX_ITERATIONS:
            return errors.UNACCEPTABLE_CREDENTIAL, (
                f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, got "
                f"{change['iterations']}")
        if not change["salt"] or len(change["salted_password"]) != MECHANISMS[mech].digest_size:
            return errors.UNACCEPTABLE_CREDENTIAL, "an empty salt or a salted password of " \
                "the wrong size"
        return None
