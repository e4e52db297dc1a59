import Foundation
import IdentityPorts

// The built-in mail templates: English and Japanese for every kind. Text templates use `{{{…}}}`
// (no HTML escaping); HTML ones `{{…}}` (escaped).

extension MailTemplates {
    /// kind → locale → (subject, text, html) sources.
    static let builtInSources: [Kind: [String: (subject: String, text: String, html: String)]] = [
        .passwordReset: [
            "en": (
                subject: "Reset your {{{appName}}} password",
                text: """
                    Someone asked to reset the password of your {{{appName}}} account.

                    Your reset code:

                    {{{code}}}
                    {{#link}}

                    Or open this link to choose a new password:
                    {{{link}}}
                    {{/link}}

                    The code works once, for {{{minutes}}} minutes. If you did not ask for it, ignore this mail: your password stays as it is.

                    """,
                html: """
                    <!doctype html>
                    <html lang="en"><body>
                    <p>Someone asked to reset the password of your {{appName}} account.</p>
                    <p>Your reset code:</p>
                    <p><code>{{code}}</code></p>
                    {{#link}}<p><a href="{{link}}">Choose a new password</a></p>{{/link}}
                    <p>The code works once, for {{minutes}} minutes. If you did not ask for it, ignore this mail: your password stays as it is.</p>
                    </body></html>

                    """),
            "ja": (
                subject: "{{{appName}}} のパスワード再設定",
                text: """
                    {{{appName}}} アカウントのパスワード再設定のご依頼を受け付けました。

                    再設定コード:

                    {{{code}}}
                    {{#link}}

                    次のリンクから新しいパスワードを設定することもできます:
                    {{{link}}}
                    {{/link}}

                    このコードは {{{minutes}}} 分間、1 回だけ使えます。お心当たりのない場合は、このメールを破棄してください。パスワードは変更されません。

                    """,
                html: """
                    <!doctype html>
                    <html lang="ja"><body>
                    <p>{{appName}} アカウントのパスワード再設定のご依頼を受け付けました。</p>
                    <p>再設定コード:</p>
                    <p><code>{{code}}</code></p>
                    {{#link}}<p><a href="{{link}}">新しいパスワードを設定する</a></p>{{/link}}
                    <p>このコードは {{minutes}} 分間、1 回だけ使えます。お心当たりのない場合は、このメールを破棄してください。パスワードは変更されません。</p>
                    </body></html>

                    """)
        ],
        .verifyEmail: [
            "en": (
                subject: "Verify your email address for {{{appName}}}",
                text: """
                    Please confirm that {{{email}}} is the email address of your {{{appName}}} account.

                    Your verification code:

                    {{{code}}}
                    {{#link}}

                    Or open this link to verify it:
                    {{{link}}}
                    {{/link}}

                    The code works for {{{hours}}} hours. If you did not create an account, ignore this mail.

                    """,
                html: """
                    <!doctype html>
                    <html lang="en"><body>
                    <p>Please confirm that {{email}} is the email address of your {{appName}} account.</p>
                    <p>Your verification code:</p>
                    <p><code>{{code}}</code></p>
                    {{#link}}<p><a href="{{link}}">Verify my email address</a></p>{{/link}}
                    <p>The code works for {{hours}} hours. If you did not create an account, ignore this mail.</p>
                    </body></html>

                    """),
            "ja": (
                subject: "{{{appName}}} メールアドレスの確認",
                text: """
                    {{{email}}} が {{{appName}}} アカウントのメールアドレスであることを確認してください。

                    確認コード:

                    {{{code}}}
                    {{#link}}

                    次のリンクから確認することもできます:
                    {{{link}}}
                    {{/link}}

                    このコードは {{{hours}}} 時間有効です。お心当たりのない場合は、このメールを破棄してください。

                    """,
                html: """
                    <!doctype html>
                    <html lang="ja"><body>
                    <p>{{email}} が {{appName}} アカウントのメールアドレスであることを確認してください。</p>
                    <p>確認コード:</p>
                    <p><code>{{code}}</code></p>
                    {{#link}}<p><a href="{{link}}">メールアドレスを確認する</a></p>{{/link}}
                    <p>このコードは {{hours}} 時間有効です。お心当たりのない場合は、このメールを破棄してください。</p>
                    </body></html>

                    """),
        ],
        .changeEmail: [
            "en": (
                subject: "Confirm your new email address for {{{appName}}}",
                text: """
                    Someone asked to make {{{newEmail}}} the email address of a {{{appName}}} account. The change takes effect only once it is confirmed.

                    Your confirmation code:

                    {{{code}}}
                    {{#link}}

                    Or open this link to confirm the change:
                    {{{link}}}
                    {{/link}}

                    The code works once, for {{{minutes}}} minutes. If you did not ask for it, ignore this mail: nothing changes.

                    """,
                html: """
                    <!doctype html>
                    <html lang="en"><body>
                    <p>Someone asked to make {{newEmail}} the email address of a {{appName}} account. The change takes effect only once it is confirmed.</p>
                    <p>Your confirmation code:</p>
                    <p><code>{{code}}</code></p>
                    {{#link}}<p><a href="{{link}}">Confirm the change</a></p>{{/link}}
                    <p>The code works once, for {{minutes}} minutes. If you did not ask for it, ignore this mail: nothing changes.</p>
                    </body></html>

                    """),
            "ja": (
                subject: "{{{appName}}} 新しいメールアドレスの確認",
                text: """
                    {{{appName}}} アカウントのメールアドレスを {{{newEmail}}} に変更するご依頼を受け付けました。確認されるまで変更は行われません。

                    確認コード:

                    {{{code}}}
                    {{#link}}

                    次のリンクから変更を確定することもできます:
                    {{{link}}}
                    {{/link}}

                    このコードは {{{minutes}}} 分間、1 回だけ使えます。お心当たりのない場合は、このメールを破棄してください。何も変更されません。

                    """,
                html: """
                    <!doctype html>
                    <html lang="ja"><body>
                    <p>{{appName}} アカウントのメールアドレスを {{newEmail}} に変更するご依頼を受け付けました。確認されるまで変更は行われません。</p>
                    <p>確認コード:</p>
                    <p><code>{{code}}</code></p>
                    {{#link}}<p><a href="{{link}}">変更を確定する</a></p>{{/link}}
                    <p>このコードは {{minutes}} 分間、1 回だけ使えます。お心当たりのない場合は、このメールを破棄してください。何も変更されません。</p>
                    </body></html>

                    """),
        ],
        .emailChanged: [
            "en": (
                subject: "The email address of your {{{appName}}} account was changed",
                text: """
                    The email address of your {{{appName}}} account was changed from {{{oldEmail}}} to {{{newEmail}}}.

                    If you made this change, there is nothing to do.

                    If you did not, undo it with this code: it restores {{{oldEmail}}} and signs the account out on every device.

                    {{{code}}}
                    {{#link}}

                    Or open this link to undo the change:
                    {{{link}}}
                    {{/link}}

                    The code works for {{{days}}} days. After undoing the change, reset your password.

                    """,
                html: """
                    <!doctype html>
                    <html lang="en"><body>
                    <p>The email address of your {{appName}} account was changed from {{oldEmail}} to {{newEmail}}.</p>
                    <p>If you made this change, there is nothing to do.</p>
                    <p>If you did not, undo it with this code: it restores {{oldEmail}} and signs the account out on every device.</p>
                    <p><code>{{code}}</code></p>
                    {{#link}}<p><a href="{{link}}">Undo the change</a></p>{{/link}}
                    <p>The code works for {{days}} days. After undoing the change, reset your password.</p>
                    </body></html>

                    """),
            "ja": (
                subject: "{{{appName}}} アカウントのメールアドレスが変更されました",
                text: """
                    {{{appName}}} アカウントのメールアドレスが {{{oldEmail}}} から {{{newEmail}}} に変更されました。

                    ご自身で変更した場合は、何もする必要はありません。

                    お心当たりのない場合は、次のコードで変更を取り消してください。{{{oldEmail}}} に戻し、すべての端末からサインアウトします。

                    {{{code}}}
                    {{#link}}

                    次のリンクから取り消すこともできます:
                    {{{link}}}
                    {{/link}}

                    このコードは {{{days}}} 日間有効です。取り消した後は、パスワードを再設定してください。

                    """,
                html: """
                    <!doctype html>
                    <html lang="ja"><body>
                    <p>{{appName}} アカウントのメールアドレスが {{oldEmail}} から {{newEmail}} に変更されました。</p>
                    <p>ご自身で変更した場合は、何もする必要はありません。</p>
                    <p>お心当たりのない場合は、次のコードで変更を取り消してください。{{oldEmail}} に戻し、すべての端末からサインアウトします。</p>
                    <p><code>{{code}}</code></p>
                    {{#link}}<p><a href="{{link}}">変更を取り消す</a></p>{{/link}}
                    <p>このコードは {{days}} 日間有効です。取り消した後は、パスワードを再設定してください。</p>
                    </body></html>

                    """),
        ],
    ]
}
