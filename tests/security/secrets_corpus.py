"""A synthetic corpus of fake secrets as they show up in agent transcripts: each entry is the
line said (by a user, an assistant or a tool) and the secret part that must never be stored.
Every value is made up; none is a live credential. Built at import so that no file of this
repository holds a string a secret scanner would flag."""

from __future__ import annotations

import base64
import random
import string

_rng = random.Random(20261201)


def _r(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _hex(n: int) -> str:
    return _r(n, "0123456789abcdef")


_B64 = string.ascii_letters + string.digits + "+/"
_UP = string.ascii_uppercase + string.digits


def _pem(kind: str, lines: int = 8) -> tuple[str, str]:
    body = "\n".join(_r(64, _B64) for _ in range(lines))
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----", body.split("\n")[3]


def _corpus() -> list[tuple[str, str, str]]:
    aws_id = "AKIA" + _r(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    aws_secret = _r(40, _B64)
    slack_hook = f"https://hooks.slack.com/services/T{_r(8, _UP)}/B{_r(8, _UP)}/{_r(24)}"
    whsec = "whsec_" + _r(32)
    pgp, pgp_body = _pem("PGP PRIVATE KEY BLOCK")
    rsa, rsa_body = _pem("RSA PRIVATE KEY")
    openssh, openssh_body = _pem("OPENSSH PRIVATE KEY")
    ec, ec_body = _pem("EC PRIVATE KEY")
    redis_pw = _r(18)
    db_pass = _r(14) + "!9"
    pg_pass = _r(16)
    json_pw = _r(15) + "#"
    json_key = _r(32)
    basic = "dXNlcjpzM2NyZXQtcGFzc3dvcmQtMTIz"
    npm = "npm_" + _r(36)
    glpat = "glpat-" + _r(20)
    hf = "hf_" + _r(34, string.ascii_letters)
    sendgrid = "SG." + _r(22) + "." + _r(43)
    azure = _r(86, _B64) + "=="
    telegram = f"{_rng.randint(100000000, 999999999)}:AA{_r(33)}"
    curl_pw = _r(12)
    pypi = "pypi-AgEIcHlwaS5vcmc" + _r(70)
    do_token = "dop_v1_" + _hex(64)
    return [
        ("aws_access_key_id", f"aws_access_key_id = {aws_id}", aws_id),
        ("aws_secret", f"aws_secret_access_key = {aws_secret}", aws_secret),
        ("aws_env", f"export AWS_SECRET_ACCESS_KEY={aws_secret[::-1]}", aws_secret[::-1]),
        ("slack_webhook", f"curl -X POST {slack_hook} -d @payload.json", slack_hook[-24:]),
        ("stripe_webhook", f"STRIPE_WEBHOOK_SECRET={whsec}", whsec),
        ("stripe_key", f"stripe.api_key = 'sk_live_{_r(24)}'", ""),
        ("pgp_private", f"Here is my key:\n{pgp}\nplease import it", pgp_body),
        ("rsa_private", f"cat id_rsa\n{rsa}", rsa_body),
        ("openssh_private", openssh, openssh_body),
        ("ec_private", f"key.pem:\n{ec}", ec_body),
        ("redis_url", f"REDIS_URL=redis://:{redis_pw}@cache.internal:6379/0", redis_pw),
        ("postgres_url", f"postgresql://app:{db_pass}@db.internal/app", db_pass),
        ("db_pass", f"DB_PASS={db_pass}", db_pass),
        ("pgpassword", f"PGPASSWORD={pg_pass} psql -h db -U app", pg_pass),
        ("json_password", f'{{"user": "app", "password": "{json_pw}"}}', json_pw),
        ("json_api_key", f'{{"api_key": "{json_key}", "region": "eu"}}', json_key),
        ("basic_auth", f"Authorization: Basic {basic}", basic),
        ("bearer", f"Authorization: Bearer {_r(40)}", ""),
        ("npm", f"//registry.npmjs.org/:_authToken={npm}", npm),
        ("gitlab", f"git clone https://oauth2:{glpat}@gitlab.com/team/app.git", glpat),
        ("huggingface", f"HF_TOKEN={hf}", hf),
        ("sendgrid", f"SENDGRID_API_KEY={sendgrid}", sendgrid),
        (
            "azure_storage",
            "DefaultEndpointsProtocol=https;AccountName=notes;"
            f"AccountKey={azure};EndpointSuffix=core.windows.net",
            azure,
        ),
        ("telegram", f"TELEGRAM_BOT_TOKEN={telegram}", telegram),
        ("curl_user", f"curl -u admin:{curl_pw} https://ci.internal/api", curl_pw),
        ("pypi", f"password = {pypi}", pypi),
        ("pypirc", f"[pypi]\nusername = __token__\npassword = {pypi[::-1]}", pypi[::-1]),
        ("digitalocean", f"doctl auth init -t {do_token}", do_token),
        ("anthropic", f"ANTHROPIC_API_KEY=sk-ant-api03-{_r(90)}", ""),
        ("openai", f"OPENAI_API_KEY=sk-proj-{_r(48)}", ""),
        ("github_pat", f"GH_TOKEN=ghp_{_r(36)}", ""),
        ("github_fine", f"token: github_pat_{_r(22)}_{_r(59)}", ""),
        ("google", f"key=AIza{_r(35)}", ""),
        ("slack_bot", f"SLACK_BOT_TOKEN=xoxb-{_rng.randint(10**11, 10**12)}-{_r(24)}", ""),
        ("jwt", f"token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx{_r(20)}.{_r(43)}", ""),
        ("twilio", f"TWILIO_API_KEY=SK{_hex(32)}", ""),
        ("mailgun", f"MAILGUN_API_KEY=key-{_hex(32)}", ""),
        ("django_secret", f"SECRET_KEY = '{_r(50)}'", ""),
        ("client_secret", f"client_secret: {_r(32)}", ""),
        ("yaml_password", f"  password: {_r(20)}", ""),
        ("mysql_cli", f"mysql -u root -p{_r(14)} app", ""),
        ("url_password", f"https://deploy:{_r(16)}@git.internal/app.git", ""),
        ("docker_login", f"docker login -u bot -p {_r(24)} registry.internal", ""),
        ("heroku", f"HEROKU_API_KEY={_hex(8)}-{_hex(4)}-{_hex(4)}-{_hex(4)}-{_hex(12)}", ""),
        ("private_key_cut", f"-----BEGIN PRIVATE KEY-----\n{_r(64, _B64)}\n{_r(64, _B64)}", ""),
        ("env_token", f"API_TOKEN={_r(40)}", ""),
    ]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _formats() -> list[tuple[str, str, str]]:
    """Formats an attacker's pass found kept, each a (kind, text, secret) with the secret
    given."""
    sas = _r(40, string.ascii_letters + string.digits + "%") + "%3D"
    pw_quoted = _r(12) + "&1"
    discord = _b64(str(_rng.randint(10**17, 10**18))).rstrip("=") + "." + _r(6) + "." + _r(38)
    docker = "dckr_pat_" + _r(27)
    doppler = "dp.st.dev." + _r(40)
    gocspx = "GOCSPX-" + _r(28)
    notion = "secret_" + _r(43)
    vault = "hvs." + _r(24)
    basic = _b64(f"deploy:{_r(16)}")
    fcm = "AAAA" + _r(7) + ":APA91b" + _r(134)
    sentry = _hex(32)
    putty = [_r(64, _B64) for _ in range(4)]
    sshpass = _r(14)
    return [
        ("azure_sas", f"az storage blob download --sas-token 'sv=2022-11-02&sr=b&sig={sas}'", sas),
        (
            "azure_sas_url",
            f"https://notes.blob.core.windows.net/c/f.txt?sp=r&sig={sas[::-1]}",
            sas[::-1],
        ),
        ("password_flag_quoted", f"mysql --user app --password '{pw_quoted}' shop", pw_quoted),
        ("discord_bot", f"Authorization: Bot {discord}", discord),
        ("docker_pat", f"echo {docker} | docker login -u bot --password-stdin", docker),
        ("doppler", f"the CI log printed {doppler} in clear", doppler),
        ("google_oauth_secret", f"OAuth client created; secret {gocspx} (keep it)", gocspx),
        ("notion", f"new Client({{ auth: '{notion}' }})", notion),
        ("vault", f"vault login {vault}", vault),
        ("basic_header", f"curl -H 'Authorization: Basic {basic}' https://ci.internal/api", basic),
        ("basic_header_dict", f"headers = {{'Authorization': 'Basic {basic[::-1]}'}}", basic[::-1]),
        ("fcm", f"FCM_SERVER_KEY={fcm}", fcm),
        ("sentry_dsn", f'sentry_sdk.init("https://{sentry}@o1234.ingest.sentry.io/567")', sentry),
        (
            "putty",
            "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 1\n"
            f"{_r(64, _B64)}\nPrivate-Lines: 4\n" + "\n".join(putty) + f"\nPrivate-MAC: {_hex(64)}",
            putty[2],
        ),
        ("sshpass", f"sshpass -p '{sshpass}' ssh deploy@10.0.0.7 uptime", sshpass),
        ("sshpass_bare", f"sshpass -p {sshpass[::-1]} rsync -a dist/ web:/srv/", sshpass[::-1]),
    ]


def _followed_by_punctuation() -> list[tuple[str, str, str]]:
    """Tokens at the end of a sentence or inside brackets: each kind with each of
    `. , ) : ! ? ] >` after it."""
    tokens = [
        ("sendgrid", lambda: "SG." + _r(22) + "." + _r(43)),
        ("huggingface", lambda: "hf_" + _r(34, string.ascii_letters)),
        ("npm", lambda: "npm_" + _r(36)),
        ("vault", lambda: "hvs." + _r(95)),
        ("digitalocean", lambda: "dop_v1_" + _hex(64)),
        ("github", lambda: "ghp_" + _r(36)),
        ("docker", lambda: "dckr_pat_" + _r(27)),
    ]
    out = []
    for n, mark in enumerate([".", ",", ")", ":", "!", "?", "]", ">"]):
        for kind, make in tokens:
            token = make()
            text = [f"The key is {token}{mark}", f"(use {token}{mark} then retry)"][n % 2]
            out.append((f"{kind}_then_{mark}", text, token))
    return out


CORPUS = _corpus() + _formats() + _followed_by_punctuation()
"""(kind, text as said, the secret part; empty: the whole line after its `=`/`:` or last
space is the secret, see `secret_of`)."""


def secret_of(kind: str, text: str, secret: str) -> str:
    if secret:
        return secret
    if kind == "private_key_cut":
        return text.splitlines()[1]
    if kind == "mysql_cli":
        return text.split()[3][2:]
    if kind in ("url_password",):
        return text.split(":")[2].split("@")[0]
    if kind == "docker_login":
        return text.split()[5]
    if kind == "jwt":
        return text.split()[1]
    for sep in ("=", ": ", " "):
        if sep in text:
            value = text.rsplit(sep, 1)[1]
            return value.strip("'\" ")
    return text


PLACEHOLDERS = [
    "export OPENAI_API_KEY=your-key-here",
    "password = <your password>",
    'api_key = "YOUR_API_KEY"',
    "Set ANTHROPIC_API_KEY=... in your shell",
    "DB_PASS=${DB_PASS}",
    "token: $GITHUB_TOKEN",
    "password: changeme",
    'secret_key = os.environ["SECRET_KEY"]',
    "Authorization: Bearer <token>",
    "postgresql://user:password@localhost/db",
    "the password field must be at least 12 characters",
    "we rotate the api key every 90 days",
    "AWS_SECRET_ACCESS_KEY=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
]
"""Text about secrets that holds none: it is stored as said and counts no redaction."""

CODE_LINES = [
    # Python
    "token_count = len(tokens)",
    "password = request.form['password']",
    'secret_key = os.environ["SECRET_KEY"]',
    "api_key = settings.OPENAI_API_KEY",
    "self.password = password",
    "access_token = response.json()['access_token']",
    "def authenticate(username: str, password: str) -> bool:",
    "token_budget: int = DEFAULT_TOKEN_BUDGET",
    "credentials = Credentials.from_authorized_user_file(token_path, SCOPES)",
    "hashed = hashlib.sha256(password.encode()).hexdigest()",
    "auth = requests.auth.HTTPBasicAuth(username, api_token)",
    "for token in tokenizer.encode(text):",
    'secret_name = f"{prefix}/{name}"',
    "api_key: str | None = None",
    # JavaScript / TypeScript
    "let apiKey = config.apiKey;",
    "const token = req.headers.authorization?.split(' ')[1];",
    "const apiSecret = process.env.API_SECRET;",
    "constructor(private readonly authService: AuthService) {}",
    "export const accessToken = useStore((state) => state.accessToken);",
    "const password = await bcrypt.hash(plainPassword, saltRounds);",
    "headers: { Authorization: `Bearer ${token}` },",
    # Go
    'token := os.Getenv("GITHUB_TOKEN")',
    "password, err := reader.ReadString('\\n')",
    "func Login(ctx context.Context, apiKey string) (*Session, error) {",
    "secretKey := []byte(cfg.JWTSecret)",
    # shell
    'export AWS_SECRET_ACCESS_KEY="$(pass show aws/secret)"',
    'curl -H "Authorization: Bearer $API_TOKEN" https://api.internal/v1/me',
    "docker run -p 8080:80 -e DB_PASSWORD=$DB_PASSWORD app:latest",
    "mkdir -p build && ssh -p 2222 deploy@bastion",
    'TOKEN=$(gh auth token) && echo "${#TOKEN}"',
    # YAML / JSON config with references
    "  password: ${DB_PASSWORD}",
    "      api_key: {{ .Values.apiKey }}",
    '  "token": "${NPM_TOKEN}",',
    "    secretKeyRef:\n      name: db-credentials\n      key: password",
    '{"auth": {"tokenUrl": "https://auth.internal/oauth/token", "clientId": "web"}}',
    "MAX_TOKENS=4096",
]
"""Ordinary code that names secrets without holding one: it must stay as written."""
